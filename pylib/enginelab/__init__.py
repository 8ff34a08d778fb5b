"""enginelab: the interactive figures built on the course modules (perf_model, inference_trace, kv_managers).

Pure Python (standard library only), so the same code renders pages at build time in CPython and every
interaction in the browser under Pyodide. Nothing here imports js or pyscript: that is site/py/'s job.
"""
