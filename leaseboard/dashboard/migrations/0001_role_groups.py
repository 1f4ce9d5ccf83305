"""Create the three human roles as auth groups (DESIGN §9)."""

from django.db import migrations

ROLES = ("operator", "approver", "manager")


def create_groups(apps, schema_editor):
    Group = apps.get_model("auth", "Group")
    for name in ROLES:
        Group.objects.get_or_create(name=name)


class Migration(migrations.Migration):
    dependencies = [("auth", "0012_alter_user_first_name_max_length")]

    operations = [migrations.RunPython(create_groups, migrations.RunPython.noop)]
