"""The command line, above every other room: tasks.py names for each invoke task the
record its action receives, whose fields are the task's options, declared once with their
help (options: opt, group, and the shared groups), the records and the actions that run
them (building, data, hosts, images), a task made from its record and errors turned into
exit codes (wrap), the names commands go by here (program), and the pages generated from
the tasks (pages)."""
