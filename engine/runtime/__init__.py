"""How forward passes run when many engines share one model: the runtime behind one executor.

The core (``engine/``) and the forward pass (``engine/model/``) know nothing of this: one engine,
one :class:`~engine.model.runner.ModelBackend`, one pass per step. A server with many engines (one
per browser session, or ``prefixlab serve``'s) adds, as vLLM separates its engine core from its
API server and its executors:

* ``executor``     :class:`Executor`: where the merged pass runs. :class:`InProcessExecutor` here,
                   :class:`~engine.runtime.worker.WorkerExecutor` in a worker process
* ``shared_pages`` one KV page tensor for a server, a partition per engine (one budget for all)
* ``batching``     :class:`~engine.runtime.batching.StepBatcher`: many engines' steps merged into one
                   pass on an executor; :class:`~engine.runtime.batching.BatchedBackend`, an engine's
                   back end on it
* ``worker``       the worker process: weights and real pages there, plain lists over a socket
* ``host``         :func:`~engine.runtime.host.tune_host`: the one explicit call that sets process-wide
                   knobs (OpenMP's wait policy); entry points call it, importing a module sets nothing
* ``huge_pages``   the weights on transparent huge pages (a malloc setting read at process start)
"""
