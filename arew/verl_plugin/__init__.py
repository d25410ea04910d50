"""Everything that couples AReW to verl 0.9.1 lives in this subpackage.

:mod:`~arew.verl_plugin.register` is what verl loads in every process (the ``verl.plugins`` entry point): the
estimators, the trainer modes, the agent loop, the bounded vLLM weight sync and the CPU platform. The rest is
what those use (:mod:`~arew.verl_plugin.trainer`, :mod:`~arew.verl_plugin.agent_loop`,
:mod:`~arew.verl_plugin.estimators`, the CPU backend :mod:`~arew.verl_plugin.cpu`) and the commands that start
verl (:mod:`~arew.verl_plugin.smoke`). Importing the package itself registers nothing and imports no verl, so
``arew smoke`` starts without verl's import in its own process.
"""
