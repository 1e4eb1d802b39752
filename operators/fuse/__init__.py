"""fuse operators: combine the rankings of a fan-in's branches into one."""
