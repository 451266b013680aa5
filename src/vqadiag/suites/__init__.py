"""The diagnostic suites: the plug-in contract (:mod:`vqadiag.suites.base`), the run state
(:mod:`vqadiag.suites.state`) and one module per built-in protocol."""
