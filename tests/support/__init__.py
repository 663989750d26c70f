"""What the tests share: helpers, fakes and contracts. Test modules import from here, never
from one another, so that each test module can be read, run and changed on its own
(``tests/unit/test_layout.py`` keeps it so); ``conftest.py`` files hold only fixtures."""
