"""The estimator shell shared by DiagAtt, NTK-Attention and the baselines."""
