"""A Sphinx extension for the book's build (``_config.yml``: ``sphinx.extra_extensions``).

Jupyter Book 1 loads ``sphinx-thebe``, which registers its inline configuration script
(``const THEBE_JS_URL = ...``) with ``app.add_js_file`` each time Sphinx reads sources; a build
that reads twice (an incremental build, or the pages Sphinx writes without a source:
``genindex``, ``search``, ``py-modindex``) lists it twice, and the browser stops on the second
``const`` declaration ("Identifier 'THEBE_JS_URL' has already been declared").  This
extension drops repeated script entries from every page's context, keeping the first."""
from __future__ import annotations


def unique_scripts(scripts) -> list:
    """``scripts`` (Sphinx's ``script_files``: file names, or ``_JavaScript`` objects with a
    ``filename`` and ``attributes`` such as an inline ``body``) without repeats, in order."""
    seen, out = set(), []
    for js in scripts:
        attrs = getattr(js, "attributes", None) or {}
        # an inline script's filename is None or "" depending on who added it: the same script
        key = (str(getattr(js, "filename", js) or ""), tuple(sorted((k, str(v)) for k, v in attrs.items())))
        if key not in seen:
            seen.add(key)
            out.append(js)
    return out


def _dedupe(app, pagename, templatename, context, doctree):
    if context.get("script_files"):
        context["script_files"] = unique_scripts(context["script_files"])


def setup(app):
    app.connect("html-page-context", _dedupe, priority=900)   # after sphinx-thebe and the theme
    return {"parallel_read_safe": True, "parallel_write_safe": True}
