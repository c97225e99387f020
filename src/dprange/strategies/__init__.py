"""What is measured, with what budget and noise: tree, Haar, matrix, Kronecker and Fourier
strategies, the budget rules, and the calibration of noise to a strategy's sensitivity."""
