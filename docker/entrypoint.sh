#!/usr/bin/env bash
# Entrypoint of the course image (docker/Dockerfile). The first argument picks a role:
#   lab           JupyterLab on 0.0.0.0:8888, rooted at the mounted course (default)
#   spark-master  standalone Spark master (RPC 7077, web UI 8080)
#   spark-worker  standalone Spark worker registering with $SPARK_MASTER
#   kafka         the course's Kafka broker in the foreground (`streamlab kafka serve`: the native broker's
#                 jars and settings, its network from the STREAMLAB_KAFKA_* variables)
#   classroom-student
#                 a student's server in the classroom (`streamlab classroom up`): the lessons copied into the
#                 student's volume once, the Kafka door as the student (streamlab/classroom/student.py), then
#                 JupyterHub's single-user server with the arguments the hub gives
#   anything else is executed as given, e.g. `streamlab grade ...` or `bash`.
set -euo pipefail

course_dir="${COURSE_DIR:-/course}"
data_dir="${STREAMLAB_DATA_DIR:-/data/streamlab}"

# Checkpoints live on a volume; make sure the tree exists even on a fresh or
# bind-mounted volume. Failing here must not stop the container.
mkdir -p "${data_dir}/checkpoints" 2>/dev/null || true

role="${1:-lab}"
if [ "$#" -gt 0 ]; then
    shift
fi

case "${role}" in
    lab)
        # Spark binds its web UI (and, in local mode, the driver) to SPARK_LOCAL_IP, which
        # streamlab defaults to 127.0.0.1 for local mode: inside a container that address
        # is unreachable through the published port 4040. Use the container's own address.
        if [ -z "${SPARK_LOCAL_IP:-}" ]; then
            container_ip="$(python -c 'import socket; print(socket.gethostbyname(socket.gethostname()))' 2>/dev/null || true)"
            if [ -n "${container_ip}" ]; then
                export SPARK_LOCAL_IP="${container_ip}"
            fi
        fi
        # A learner's JupyterLab, as `make lab` opens it: nbgrader's Validate button, not the instructor's
        # tools (streamlab/stack/jupyter.py). STREAMLAB_INSTRUCTOR=1 keeps the formgrader and Create Assignment.
        if [ -z "${STREAMLAB_INSTRUCTOR:-}" ]; then
            learner_config="$(python -c 'from streamlab.stack import jupyter; print(jupyter.LEARNER_CONFIG)')"
            export JUPYTER_CONFIG_PATH="${learner_config}${JUPYTER_CONFIG_PATH:+:${JUPYTER_CONFIG_PATH}}"
        fi
        # Jupyter refuses to run as root unless told to (STREAMLAB_UID=0).
        if [ "$(id -u)" = "0" ]; then
            set -- --allow-root "$@"
        fi
        # Token: JUPYTER_TOKEN from the environment (compose sets it; see docker/README.md).
        # allow_remote_access=False rejects requests whose Host header is not local
        # (DNS-rebinding protection); the port is published on 127.0.0.1 only anyway.
        exec jupyter lab \
            --ip=0.0.0.0 \
            --port=8888 \
            --no-browser \
            --ServerApp.root_dir="${course_dir}" \
            --ServerApp.allow_remote_access=False \
            --LabApp.default_url="/lab/tree/notebooks/00_setup.ipynb" \
            "$@"
        ;;
    classroom-student)
        work="${HOME}/work"
        mkdir -p "${work}/notebooks" "${work}/labs" "${work}/zh/notebooks"
        cp -rn "${course_dir}/notebooks/." "${work}/notebooks/" 2>/dev/null || true
        cp -rn "${course_dir}/zh/notebooks/." "${work}/zh/notebooks/" 2>/dev/null || true  # the course in Chinese
        chmod -R u+w "${work}/notebooks" "${work}/zh" 2>/dev/null || true
        python -m streamlab classroom door &
        if [ -z "${STREAMLAB_INSTRUCTOR:-}" ]; then
            learner_config="$(python -c 'from streamlab.stack import jupyter; print(jupyter.LEARNER_CONFIG)')"
            export JUPYTER_CONFIG_PATH="${learner_config}${JUPYTER_CONFIG_PATH:+:${JUPYTER_CONFIG_PATH}}"
        fi
        cd "${work}"
        exec jupyterhub-singleuser "$@"
        ;;
    kafka)
        exec streamlab kafka serve "$@"
        ;;
    spark-master)
        # SPARK_DAEMON_MEMORY (heap of this JVM) is read by spark-class.
        exec spark-class org.apache.spark.deploy.master.Master \
            --host "${SPARK_MASTER_HOST:-$(hostname)}" \
            --port "${SPARK_MASTER_PORT:-7077}" \
            --webui-port "${SPARK_MASTER_WEBUI_PORT:-8080}" \
            "$@"
        ;;
    spark-worker)
        # SPARK_WORKER_CORES / SPARK_WORKER_MEMORY (what executors may use) and
        # SPARK_DAEMON_MEMORY (heap of the worker JVM itself) are read by Spark.
        exec spark-class org.apache.spark.deploy.worker.Worker \
            --webui-port "${SPARK_WORKER_WEBUI_PORT:-8081}" \
            "$@" \
            "${SPARK_MASTER:?set SPARK_MASTER, e.g. spark://spark-master:7077}"
        ;;
    *)
        exec "${role}" "$@"
        ;;
esac
