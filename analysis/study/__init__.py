"""Studies: many experiments from one YAML spec (docs/studies.md).

Layers, each usable alone: kit (what the checkout accepts: engines, faults, parameters),
spec (parse and check a spec), plan (expand, name, scale and order the runs), runner (run the
plan with an injected experiment function: resume, failure limit, the study record), ansible
(that function through ansible-runner), progress (the terminal display), report (compare and
advice over the study's runs) and __main__ (the command line).
"""
