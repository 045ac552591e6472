"""How good a kernel's reference is (``reference_kind``), best first: ``twin`` (an isolated run, or the in-run
isolated steps); for the detector's within-trace estimates ``clean``, ``borrowed``, ``corrected`` and
``contaminated`` (``within_trace``); ``none`` (no reference: never a case)."""

TWIN, NONE = "twin", "none"
CLEAN, BORROWED, CORRECTED, CONTAMINATED = "clean", "borrowed", "corrected", "contaminated"
ESTIMATED = (CLEAN, BORROWED, CORRECTED, CONTAMINATED)  # the detector's kinds
