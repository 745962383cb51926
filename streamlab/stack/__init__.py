"""The stack: what runs the course, before any lesson starts.

Java (``java``) and where things live (``paths``); the pins (``pins``), the jars (``jars``) and the JVMs'
start-up archives (``jvm_archives``, made by ``make_archives``); Kafka: its settings (``kafka_settings``),
the native broker (``broker``), a private broker to stop under a running query (``private_broker``) and
the Python client side (``kafka``: which broker, topics, producing, reading); Spark: the session
(``session``), the local cluster (``cluster``) and its UI's JSON (``spark_ui``); Kafka's console tools
(``console``); and the doctor that checks all of it (``doctor``).

Nothing here imports the lessons' helpers or the grader.
"""
