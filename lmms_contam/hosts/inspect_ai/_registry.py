"""inspect-ai's entry point (`[project.entry-points.inspect_ai] lmms_contam = ...`): importing it registers every
task, so that `inspect eval lmms_contam/mmstar_contam` finds it."""

from inspect_ai import task

from lmms_contam.hosts.inspect_ai.tasks import task_function, task_names

for _name, (_benchmark, _family) in task_names().items():
    globals()[_name] = task(name=_name)(task_function(_benchmark, _family))
