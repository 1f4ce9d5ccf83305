"""The admin role as an auth group (DESIGN §9's three roles have theirs from the
dashboard's first migration): admins configure, and are kept apart from supervision."""

from django.db import migrations


def create_group(apps, schema_editor):
    Group = apps.get_model("auth", "Group")
    Group.objects.get_or_create(name="admin")


class Migration(migrations.Migration):
    dependencies = [
        ("policy", "0001_policy_change"),
        ("auth", "0012_alter_user_first_name_max_length"),
    ]

    operations = [migrations.RunPython(create_group, migrations.RunPython.noop)]
