"""A storage URL as it may be printed: the password replaced by ***."""

from __future__ import annotations

import re

_USERINFO = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<user>[^:@/]*):(?P<password>[^@/]*)@")


def masked(url: str) -> str:
    return _USERINFO.sub(lambda m: f"{m['scheme']}{m['user']}:***@", url)
