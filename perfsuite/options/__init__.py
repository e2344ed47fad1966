"""The user's choices: `settings` (command-line options over [tool.perfsuite] over defaults, validated once) and
`paths` (path options pytest would misread as test paths)."""
