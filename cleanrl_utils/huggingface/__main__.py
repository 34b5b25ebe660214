from cleanrl_utils.huggingface.push import main

main()
