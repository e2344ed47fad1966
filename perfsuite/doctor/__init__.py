"""Machine diagnosis: facts of this machine, and pure checks of those facts."""
