"""Files and values from outside: atomic writes, writability, checks on untrusted values, keeping damaged
files aside."""
