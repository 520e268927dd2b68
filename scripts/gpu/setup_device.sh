# Source this first in every device command: installs the carried wheels (pydantic is not in the
# device image) into /tmp/site and puts them and the repo on PYTHONPATH.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || return 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
