"""Developer scripts; ``scripts.docsgen`` generates the docs site's references."""
