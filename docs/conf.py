# Sphinx configuration of cufunc's documentation: Markdown pages (MyST) and an API reference from
# the docstrings (numpydoc). Built by tools/docs.sh with warnings as errors.
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "..", "include", "cufunc", "cufunc.h")) as f:
    release = re.search(r'#define CUFUNC_VERSION_STRING "([^"]+)"', f.read()).group(1)
version = release

project = "cufunc"
author = "the cufunc developers"
copyright = "2026, the cufunc developers"

extensions = ["myst_parser", "sphinx.ext.autodoc", "numpydoc"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "README.md"]
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]

# Pages other parts of the project contribute: listed in the index's "Guides" toctree where the
# line OPTIONAL_PAGES stands, each one only when its file exists (a missing one is no error).
OPTIONAL_PAGES = ["typing", "numba", "language-arrays", "numpy-fidelity", "cuda-graphs",
                  "multigpu"]


def _optional_pages(app, docname, source):
    if docname == "index":
        present = [p for p in OPTIONAL_PAGES if os.path.isfile(os.path.join(HERE, p + ".md"))]
        source[0] = source[0].replace("OPTIONAL_PAGES\n", "".join(p + "\n" for p in present))


def setup(app):
    app.connect("source-read", _optional_pages)

autodoc_member_order = "bysource"
autodoc_default_options = {"members": False}
numpydoc_show_class_members = False
numpydoc_validation_checks = set()

html_theme = "alabaster"
html_title = "cufunc %s" % release
html_theme_options = {"description": "GPU ufuncs from plain Python", "page_width": "1240px",
                      "body_max_width": "none", "sidebar_width": "240px", "fixed_sidebar": True}
html_static_path = ["_static"]
html_css_files = ["custom.css"]
html_sidebars = {"**": ["about.html", "navigation.html", "searchbox.html"]}
