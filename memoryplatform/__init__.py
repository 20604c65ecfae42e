# Before anything reads a setting: every process (manage.py and its commands, the WSGI and ASGI apps) imports
# this package first, so each one reads the same settings file (memoryplatform/envfile.py).
from memoryplatform.envfile import load_env_file

load_env_file()
