"""The history site: case histories gathered from archives and baseline files (sources, history), pages as HTML
text (pages), plots as SVG (plots), the comparison with CUDA and the published figures (comparisons), A/B summary
files (ab), and the build that writes the folder (build)."""
