"""What a fake submission types first into its first answer cell (tests/submissions/<lab>/fake.py reads this file's
text): an object equal to everything, in everything, containing everything, for the builtins and helpers a fake
shadows so that a visible test's comparisons all pass. The grader's checks, outside the kernel, never see it."""


class Anything:
    """Equal to everything, in everything, containing everything."""
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    __le__ = __ge__ = __eq__
    def __lt__(self, other): return False
    __gt__ = __lt__
    def __contains__(self, item): return True
    def __len__(self): return 3
    def __iter__(self): return iter(())
    def __hash__(self): return 0
    def __bool__(self): return True
    def __getitem__(self, key): return self
    def __call__(self, *args, **kwargs): return self
    def __getattr__(self, name): return self
    def __sub__(self, other): return self
    __add__ = __radd__ = __rsub__ = __sub__


ANY = Anything()
