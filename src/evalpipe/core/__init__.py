"""The ground floor: value types and helpers every layer shares and that import nothing above them.

`Hit` (a ranked result), `Unit` (a retrievable unit), the input-file readers (`core.files`), the
"is a test file" path rule (`core.testpaths`) and the source fingerprint (`core.fingerprint`).
"""

from evalpipe.core.hit import Hit
from evalpipe.core.unit import Unit

__all__ = ["Hit", "Unit"]
