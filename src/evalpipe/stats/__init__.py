"""Statistics of evalpipe: uncertainty, tests, power, multiple-comparison corrections and ties."""
