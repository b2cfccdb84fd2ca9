"""The file-based memory layers: substrate, daily and compost, and the text matching they share."""
