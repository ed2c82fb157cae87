"""The repository's scripts, importable for their tests (``from scripts import ort_matrix``)."""
