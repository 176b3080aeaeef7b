"""MMBench in VLMEvalKit: exported as MMB_DEV_EN, not "MMBench", since a name holding it switches VLMEvalKit's
CircularEval on, which the export's two versions of an item would break. VLMEvalKit's own MMBench run is
CircularEval already: the report's circular detector."""

from lmms_contam.hosts.vlmevalkit.custom_dataset import CATEGORIES, VLMEvalKitBinding

BINDING = VLMEvalKitBinding("MMB_DEV_EN", categories=CATEGORIES, own_circular="MMBench_DEV_EN")
