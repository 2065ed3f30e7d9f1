"""`farm serve`: the approval app over a run's report (an HTTP server: the report's pages, the
decisions a reviewer makes, and catching up with the golden index as it changes elsewhere).
The report it serves is farm.report's; this package only serves it and takes decisions."""
