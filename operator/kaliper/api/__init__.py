"""The Kaliper API: pydantic models of the four kinds, the single source of the CRDs (kaliper.api.resources holds
them together).

Nothing is imported here: load generators, model servers and optimizers each import the part of the API they use
(kaliper.api.units, kaliper.api.profilerun), and importing the package built all four kinds' models in each of
them too (0.15 s of CPU more per load generator process, of which a test run starts hundreds).
"""
