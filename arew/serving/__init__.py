"""The simulated user's inference server as a service of the training run's Ray cluster.

``arew_user_service.mode=ray`` (``arew/configs/base/arew.yaml``): when the task's environment options
ask for an LLM user (``user: llm`` with ``user_url``/``user_model``, or tau2-dual's
``customer: llm`` with ``customer_url``/``customer_model``), the trainer starts the server
(vLLM's OpenAI-compatible server by default) in Ray actors that hold its GPUs, waits for its
health check, writes its URL into ``arew_agent.env_options`` before any agent-loop worker
starts, restarts the server process when it dies, and stops it when the run ends.

- :mod:`arew.serving.spec`: what to start and the start-up checks (GPU budget, batch
  divisibility); no Ray, no verl.
- :mod:`arew.serving.ray_service`: the Ray actors and the service handle.
"""
