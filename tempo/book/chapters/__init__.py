"""The chapter layer: what each notebook of the book computes for its page.

One module per notebook (``chNN_slug`` for ``notebooks/NN_slug.md``) holds the page's
experiment sizes per build profile, the summaries and side-by-side tables it displays, and the
numbers and Markdown its prose quotes.  A notebook's code cell calls one of these functions (or
a chart builder of :mod:`tempo.book.figures`) and displays the result; the library below
(``tempo.theory``, ``tempo.world``, ``tempo.studies``) computes results and never formats a page.
``tests/test_notebook_cells.py`` holds the notebooks to that.

The modules sit in the book layer: they may import anything below it (core, paper, policies,
theory, world, studies, calib, serving) and the book's own :mod:`~tempo.book.paper` (glue),
:mod:`~tempo.book.claims` and :mod:`~tempo.book.figures`; nothing outside ``tempo/book/chapters``
imports them.
"""
