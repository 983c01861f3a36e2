"""The built-in check families of the smoke suite (target side: Python 3.8, stdlib + torch).

Each module's ``checks(torch, config, Check)`` lists its checks; ``suite.family_checks`` imports one family
just before it runs, so a family that fails to load is one error result, not the end of the suite.
"""
