"""Data curation: contamination checks, variants, difficulty stratification, reference
checks, mixtures."""
