"""The command line, above every other room: tasks.py hands each invoke task's options
here as a small record (options), the help written once (helptext), the action that
runs it (building, data, hosts, images), errors turned into exit codes (wrap), the names
commands go by here (program), and the pages generated from the tasks (pages)."""
