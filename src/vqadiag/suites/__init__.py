"""The suite contract the protocols build on: the plug-in API (:mod:`vqadiag.suites.base`),
the run state (:mod:`vqadiag.suites.state`), the shared question sources
(:mod:`vqadiag.suites.sources`) and the grounding runs (:mod:`vqadiag.suites.grounding`)."""
