from replmon.cli.app import main

main()
