"""The `evalpipe compare` command: are the differences between runs real? (`compare.cli`)"""
