"""The course as a website: the executed lessons, the labs as students get them, the glossary and the
instructors' guide, as static pages that read offline (``streamlab site``, ``make site``).

    executed   the lessons executed once (by the notebook tests, or here when a copy is missing)
    pages      which pages the site has, in course order, and where each comes from
    build      turns them into HTML: one layout, navigation, previous/next, links between pages
    search     the index the search box looks through
    mermaid    the pinned library that draws the diagrams

The room needs only the stack (paths, the broker): nothing of the lessons' helpers or the grader.
"""
