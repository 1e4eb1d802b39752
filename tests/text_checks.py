"""What a test looks for in a message to say that something was not printed, rather than a bare word.

A message names the user's files, and each test's files are under a temporary folder whose name is random
(CI's ``/dev/shm/tmp.3uUi6BYKBR`` held ``KB``) or the user's own (``/home/Zoë/Traceback notes``): a check that
the word ``Traceback`` is not in a message fails on such a path. A traceback is what Python prints before one.
"""

#: The line Python prints before a traceback (``traceback.format_exc``, an uncaught exception, Ray's task errors).
TRACEBACK = "Traceback (most recent call last)"
