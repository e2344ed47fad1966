"""Analyses of result files that need no torch: compare two result sets, the gains of each switch."""
