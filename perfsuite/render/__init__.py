"""Rendering for people: units, tables, the gate summary and comparison charts."""
