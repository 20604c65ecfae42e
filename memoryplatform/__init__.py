# Before anything reads a setting: every process imports this package first (config/ does, and
# config.settings), so each one reads the same settings file (memoryplatform/envfile.py).
from memoryplatform.envfile import load_env_file

load_env_file()
