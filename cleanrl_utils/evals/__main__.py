from cleanrl_utils.evals import main

main()
