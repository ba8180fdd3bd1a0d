"""The docs site's references, generated from the code (``make docs``; mkdocs.yml ``hooks``).

One module per reference, each a pure function from the code's own objects to Markdown, and a
``missing_*`` check beside it that lists what the docs would not describe (tests/docs/):

- ``settings``: the settings model (``webhook.base.config.Settings`` and its nested sections);
- ``cli``: the argparse parsers the ``snapready`` entry point builds (pyproject
  ``[project.scripts]``);
- ``rules``: every rule id a finding can carry, found in the package's source;
- ``metrics``: every Prometheus series the package defines, found in its source;
- ``chart``: ``chart/values.yaml`` and its ``# --`` comments;
- ``links``: the links and anchors between the pages, and the code's citations of them;
- ``hook``: the MkDocs hook that puts the references into the pages at their markers.
"""
