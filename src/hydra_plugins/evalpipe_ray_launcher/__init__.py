"""A Hydra launcher over Ray's task API, shipped with evalpipe (`hydra/launcher=ray`).

Why not hydra-ray-launcher: its 1.2.2 release pins cloudpickle<3 (which joblib>=1.5 cannot
use, so it needed a second virtualenv) and always passes object_store_memory, which Ray
refuses when connecting to a running cluster. This plugin keeps its config keys
(`hydra.launcher.ray.init.*` -> `ray.init`, `hydra.launcher.ray.remote.*` -> the task's
`.options`) and adds what a sweep needs on a cluster: the sweep's environment passed to
the tasks, one clear line for a point whose worker died, and Ctrl-C/SIGTERM cancelling
the remaining tasks.
"""
