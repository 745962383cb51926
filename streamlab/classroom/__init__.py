"""A classroom on one Linux server: JupyterHub, a server per student in its own container, one Kafka shared safely.

    streamlab classroom up --roster students.txt     the hub, the class's Kafka, ready for students to sign in
    streamlab classroom status                       what runs, who has a server
    streamlab classroom hand-out LAB                 the released lab into every student's files (never over their work)
    streamlab classroom collect LAB                  each student's ``submitted/LAB`` (``streamlab submit LAB``)
    streamlab classroom return LAB GRADES            each student's feedback page into their files
    streamlab classroom down                         everything stopped; the students' files and the class's topics kept

The rooms: ``hub`` (the instructor's side: the containers, the hub process, the hub's REST API), ``student`` (what
runs in a student's container: the Kafka door and ``streamlab submit``), ``admit`` (run inside the class's Kafka
container: a student's principal, made with the grader's own ``tenancy``), and ``jupyterhub_config`` (the hub's
configuration, read by JupyterHub from the environment ``hub`` gives it).

Tenancy while students work: every student's Kafka clients (Spark's, kafka-python's, the lessons' own) use
``KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:19094``, which in a student's container is the door: each connection is
logged in to the class's broker as the student's own principal (SCRAM) and then joined, unchanged. The principal
may touch only what starts with ``<student>-`` (``STREAMLAB_TOPIC_PREFIX``, the prefix every ``sl.new_topic`` and
group of the course already takes), under a produce quota; the teacher's may also read everything. The broker's
PLAINTEXT listener and its controller listen on its container's loopback only, so no student reaches them.
"""
from __future__ import annotations

NETWORK = "streamlab-classroom"             # the Docker network of the class: the broker and the students' servers
KAFKA_CONTAINER = "streamlab-classroom-kafka"
KAFKA_ALIAS = "kafka"                       # the broker's name on that network
CLASS_PORT = 19094                          # its SASL/SCRAM listener, and the door's port in each student's container
ADMIN_SERVERS = "127.0.0.1:19092"           # its PLAINTEXT listener, inside its own container only
NAME_PATTERN = r"[a-z][a-z0-9_]{0,31}"       # a roster name: a hub user, a container's name, a Kafka prefix


def topic_prefix(user: str) -> str:
    """What a student's topics, groups and transactional ids start with (one student's never starts another's:
    names hold no ``-``)."""
    return f"{user}-"
