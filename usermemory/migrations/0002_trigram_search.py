"""Creates nothing. It once made pg_trgm GIN indexes for the substring search; the search now reads casefolded
columns and full-text search (0009, which drops those indexes where they exist), so a fresh database never
needs the pg_trgm extension. Kept, empty, so the migration graph stays as it was (no release shipped)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("usermemory", "0001_initial")]

    operations = []
